

func.func @linear_contraction(%x: tensor<2x8x24xf32>, %w: tensor<16x72xf32>) {
  // expected-error @+1 {{'dsc.linear' op input [2, 8, 24] does not match weight [16, 72]: contraction sizes 24 vs 16}}
  %0 = dsc.linear %x, %w : (tensor<2x8x24xf32>, tensor<16x72xf32>) -> tensor<2x8x72xf32>
  return
}

