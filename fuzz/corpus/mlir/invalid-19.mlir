

func.func @softmax_causal(%x: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'dsc.softmax' op causal mask needs Tq <= Tk, got [2, 8, 4]}}
  %0 = dsc.softmax %x {causal = true} : (tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return
}

