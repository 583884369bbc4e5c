

func.func @linear_bias(%x: tensor<2x8x24xf32>, %w: tensor<24x72xf32>, %b: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.linear' op bias has shape [24], expected [72]}}
  %0 = dsc.linear %x, %w, %b : (tensor<2x8x24xf32>, tensor<24x72xf32>, tensor<24xf32>) -> tensor<2x8x72xf32>
  return
}

