

func.func @bmm_batch(%a: tensor<2x8x4xf32>, %b: tensor<3x4x8xf32>) {
  // expected-error @+1 {{'dsc.batch_matmul' op batch dimensions differ: [2, 8, 4] vs [3, 4, 8]}}
  %0 = dsc.batch_matmul %a, %b : (tensor<2x8x4xf32>, tensor<3x4x8xf32>) -> tensor<2x8x8xf32>
  return
}

