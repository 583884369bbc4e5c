

func.func @linear_grad_weight(%x: tensor<2x8x24xf32>, %dy: tensor<2x7x72xf32>) {
  // expected-error @+1 {{'dsc.linear_grad_weight' op input [2, 8, 24] and gradient [2, 7, 72] differ in leading dimensions}}
  %0 = dsc.linear_grad_weight %x, %dy : (tensor<2x8x24xf32>, tensor<2x7x72xf32>) -> tensor<24x72xf32>
  return
}

