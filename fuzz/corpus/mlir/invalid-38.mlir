

func.func @concat_axis(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'dsc.concat' op axis 2 is out of range for [8, 3]}}
  %0 = dsc.concat %a, %a {axis = 2 : i64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  return
}

