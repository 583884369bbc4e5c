

func.func @invertible_rstd(%x: tensor<2x8x24xf32>, %g: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.invertible_layer_norm' op rstd has shape [2, 24], expected [2, 8]}}
  %y, %r = dsc.invertible_layer_norm %x, %g, %g {epsilon = 1.0e-5 : f64} : (tensor<2x8x24xf32>, tensor<24xf32>, tensor<24xf32>) -> (tensor<2x8x24xf32>, tensor<2x24xf32>)
  return
}

