// RUN: dsc-opt %s -split-input-file -verify-diagnostics

func.func @embedding_table_rank(%t: tensor<50xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{'dsc.embedding' op expects a rank-2 table, got [50]}}
  %0 = dsc.embedding %t, %ids : (tensor<50xf32>, tensor<2x8xi32>) -> tensor<2x8x24xf32>
  return
}

