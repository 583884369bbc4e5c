

func.func @bmm_contraction(%a: tensor<2x8x4xf32>, %b: tensor<2x5x8xf32>) {
  // expected-error @+1 {{'dsc.batch_matmul' op contraction sizes differ: [2, 8, 4] @ [2, 5, 8]}}
  %0 = dsc.batch_matmul %a, %b : (tensor<2x8x4xf32>, tensor<2x5x8xf32>) -> tensor<2x8x8xf32>
  return
}

