

func.func @rms_norm_eps(%x: tensor<2x24xf32>, %w: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.rms_norm' op expects epsilon > 0}}
  %0 = dsc.rms_norm %x, %w {epsilon = -1.0e-6 : f64} : (tensor<2x24xf32>, tensor<24xf32>) -> tensor<2x24xf32>
  return
}

