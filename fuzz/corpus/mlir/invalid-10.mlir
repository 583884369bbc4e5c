

func.func @rms_norm_weight(%x: tensor<2x24xf32>, %w: tensor<12xf32>) {
  // expected-error @+1 {{'dsc.rms_norm' op normalization parameter has shape [12], expected [24]}}
  %0 = dsc.rms_norm %x, %w : (tensor<2x24xf32>, tensor<12xf32>) -> tensor<2x24xf32>
  return
}

