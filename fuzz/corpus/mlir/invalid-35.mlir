

func.func @adam_state_shape(%p: tensor<4x4xf32>, %m: tensor<4x3xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adam' op state #0 has shape [4, 3], expected [4, 4]}}
  %a:3 = dsc.adam %p, %p, %m, %p, %lr, %s, %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, adamw = true, bias_correction = true} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x3xf32>, tensor<4x4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
  return
}

