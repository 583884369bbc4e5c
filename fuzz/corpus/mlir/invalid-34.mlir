

func.func @lamb_gradient_shape(%p: tensor<4x4xf32>, %g: tensor<2x8xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.lamb' op gradient has shape [2, 8], expected [4, 4]}}
  %a:3 = dsc.lamb %p, %g, %p, %p, %lr, %s, %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-6 : f64, weight_decay = 0.0 : f64, bias_correction = true, max_coeff = 10.0 : f64, min_coeff = 0.01 : f64} : (tensor<4x4xf32>, tensor<2x8xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
  return
}

