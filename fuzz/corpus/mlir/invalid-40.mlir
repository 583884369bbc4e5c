

func.func @split_piece(%a: tensor<8x3xf32>) {
  // expected-error @+1 {{'dsc.split' op piece has shape [4, 2], expected [4, 3]}}
  %0, %1 = dsc.split %a {axis = 0 : i64} : (tensor<8x3xf32>) -> (tensor<4x3xf32>, tensor<4x2xf32>)
  return
}

