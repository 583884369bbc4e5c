

func.func @rms_norm_grad_shapes(%dy: tensor<2x12xf32>, %x: tensor<2x24xf32>, %w: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.rms_norm_grad' op gradient has shape [2, 12], expected [2, 24]}}
  %0:2 = dsc.rms_norm_grad %dy, %x, %w : (tensor<2x12xf32>, tensor<2x24xf32>, tensor<24xf32>) -> (tensor<2x24xf32>, tensor<24xf32>)
  return
}

