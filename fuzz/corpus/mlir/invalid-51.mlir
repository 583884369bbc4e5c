

func.func @layer_norm_grad_from_output_residual(%dy: tensor<2x24xf32>, %g: tensor<24xf32>, %r: tensor<2xf32>, %d: tensor<3x24xf32>) {
  // expected-error @+1 {{'dsc.layer_norm_grad_from_output' op residual gradient has shape [3, 24], expected [2, 24]}}
  %0:3 = dsc.layer_norm_grad_from_output %dy, %dy, %g, %g, %r, %d : (tensor<2x24xf32>, tensor<2x24xf32>, tensor<24xf32>, tensor<24xf32>, tensor<2xf32>, tensor<3x24xf32>) -> (tensor<2x24xf32>, tensor<24xf32>, tensor<24xf32>)
  return
}

