

func.func @embedding_grad(%ids: tensor<2x8xi32>, %dy: tensor<2x8x24xf32>) {
  // expected-error @+1 {{'dsc.embedding_grad' op gradient [2, 8, 24] does not match ids [2, 8] and table [50, 16]}}
  %0 = dsc.embedding_grad %ids, %dy : (tensor<2x8xi32>, tensor<2x8x24xf32>) -> tensor<50x16xf32>
  return
}

