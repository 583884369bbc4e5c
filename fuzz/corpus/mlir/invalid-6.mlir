

func.func @linear_weight_rank(%x: tensor<2x8x24xf32>, %w: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.linear' op expects input of rank >= 1 and a rank-2 weight, got input [2, 8, 24] and weight [24]}}
  %0 = dsc.linear %x, %w : (tensor<2x8x24xf32>, tensor<24xf32>) -> tensor<2x8x24xf32>
  return
}

