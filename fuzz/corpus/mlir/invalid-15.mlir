

func.func @merge_heads_rank(%x: tensor<2x8x24xf32>) {
  // expected-error @+1 {{'dsc.merge_heads' op expects [B, H, T, D] parts, got [2, 8, 24]}}
  %0 = dsc.merge_heads %x : (tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
  return
}

