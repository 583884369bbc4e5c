

func.func @concat_sum(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'dsc.concat' op pieces sum to 8 along axis 0, expected 9}}
  %0 = dsc.concat %a, %a {axis = 0 : i64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<9x3xf32>
  return
}

