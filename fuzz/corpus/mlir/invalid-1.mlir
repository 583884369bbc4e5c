

func.func @embedding_result(%t: tensor<50x24xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{'dsc.embedding' op result has shape [2, 8, 16], expected [2, 8, 24]}}
  %0 = dsc.embedding %t, %ids : (tensor<50x24xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  return
}

