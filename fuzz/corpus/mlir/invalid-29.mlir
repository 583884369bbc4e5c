

func.func @all_reduce_op(%x: tensor<4xf32>) {
  // expected-error @+2 {{expected ::mlir::dsc::ReduceKind to be one of: sum, mean}}
  // expected-error @+1 {{failed to parse Dsc_ReduceKindAttr parameter 'value'}}
  %0 = dsc.all_reduce %x {op = #dsc<reduce max>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

