

func.func @iota_rank() {
  // expected-error @+1 {{'dsc.iota' op expects a rank-1 result, got [2, 4]}}
  %0 = dsc.iota : () -> tensor<2x4xi32>
  return
}

