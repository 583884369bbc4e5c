

func.func @bmm_rank(%a: tensor<8x8xf32>) {
  // expected-error @+1 {{'dsc.batch_matmul' op expects operands of equal rank >= 3, got [8, 8] and [8, 8]}}
  %0 = dsc.batch_matmul %a, %a : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

