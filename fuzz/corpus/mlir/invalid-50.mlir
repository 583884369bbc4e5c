

func.func @layer_norm_grad_residual(%dy: tensor<2x24xf32>, %g: tensor<24xf32>, %d: tensor<3x24xf32>) {
  // expected-error @+1 {{'dsc.layer_norm_grad' op residual gradient has shape [3, 24], expected [2, 24]}}
  %0:3 = dsc.layer_norm_grad %dy, %dy, %g, %d {epsilon = 1.0e-5 : f64} : (tensor<2x24xf32>, tensor<2x24xf32>, tensor<24xf32>, tensor<3x24xf32>) -> (tensor<2x24xf32>, tensor<24xf32>, tensor<24xf32>)
  return
}

