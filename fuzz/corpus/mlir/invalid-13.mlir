

func.func @split_heads_width(%x: tensor<2x8x70xf32>) {
  // expected-error @+1 {{'dsc.split_heads' op width 70 is not divisible into 3 part(s) of 3 heads}}
  %q, %k, %v = dsc.split_heads %x {num_heads = 3 : i64} : (tensor<2x8x70xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>)
  return
}

