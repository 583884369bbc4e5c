

func.func @sgd_result(%p: tensor<4x4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.sgd' op result #1 has shape [4], expected [4, 4]}}
  %a:2 = dsc.sgd %p, %p, %p, %lr, %s, %lr {momentum = 0.9 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4xf32>)
  return
}

