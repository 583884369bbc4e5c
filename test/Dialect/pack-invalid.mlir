// RUN: dsc-opt %s -split-input-file -verify-diagnostics

func.func @count(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{the pieces hold 10 elements but the packed tensor 11}}
  %p = dsc.pack %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<11xf32>
  return
}

// -----

func.func @rank(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{the packed tensor must be 1-D, got 'tensor<2x3xf32>'}}
  %p = dsc.pack %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @types(%a: tensor<6xbf16>) {
  // expected-error @+1 {{element types differ: 'tensor<6xbf16>' and 'tensor<6xf32>'}}
  %p = dsc.pack %a : (tensor<6xbf16>) -> tensor<6xf32>
  return
}

// -----

func.func @none() {
  // expected-error @+1 {{needs at least one input}}
  %p = dsc.pack : () -> tensor<0xf32>
  return
}

// -----

func.func @unpack_count(%p: tensor<10xf32>) {
  // expected-error @+1 {{the pieces hold 9 elements but the packed tensor 10}}
  %x, %y = dsc.unpack %p : (tensor<10xf32>) -> (tensor<2x3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @unpack_none(%p: tensor<10xf32>) {
  // expected-error @+1 {{needs at least one result}}
  dsc.unpack %p : (tensor<10xf32>) -> ()
  return
}

// -----

func.func @chunks_zero(%a: tensor<6xf32>) {
  // expected-error @+1 {{chunks must be >= 1, got 0}}
  %p = dsc.pack %a {chunks = 0 : i64} : (tensor<6xf32>) -> tensor<6xf32>
  return
}

// -----

func.func @chunks_uneven(%a: tensor<6xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'tensor<3xf32>' does not split into 2 equal chunks}}
  %p = dsc.pack %a, %b {chunks = 2 : i64} : (tensor<6xf32>, tensor<3xf32>) -> tensor<9xf32>
  return
}
