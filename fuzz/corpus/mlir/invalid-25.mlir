

func.func @linear_grad_input(%dy: tensor<2x8x24xf32>, %w: tensor<24x72xf32>) {
  // expected-error @+1 {{'dsc.linear_grad_input' op gradient [2, 8, 24] does not match weight [24, 72]}}
  %0 = dsc.linear_grad_input %dy, %w : (tensor<2x8x24xf32>, tensor<24x72xf32>) -> tensor<2x8x24xf32>
  return
}

