

func.func @add_broadcast(%a: tensor<2x8x24xf32>, %b: tensor<7x24xf32>) {
  // expected-error @+1 {{'dsc.add' op rhs [7, 24] does not broadcast to lhs [2, 8, 24]}}
  %0 = dsc.add %a, %b : (tensor<2x8x24xf32>, tensor<7x24xf32>) -> tensor<2x8x24xf32>
  return
}

