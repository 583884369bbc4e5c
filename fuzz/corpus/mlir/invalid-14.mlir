

func.func @split_heads_part(%x: tensor<2x8x24xf32>) {
  // expected-error @+1 {{'dsc.split_heads' op part has shape [2, 8, 3, 8], expected [2, 3, 8, 8]}}
  %q = dsc.split_heads %x {num_heads = 3 : i64} : (tensor<2x8x24xf32>) -> tensor<2x8x3x8xf32>
  return
}

