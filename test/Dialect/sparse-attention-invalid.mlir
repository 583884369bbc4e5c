// RUN: dsc-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{block layout rows must hold heads * blocks + 1 = 4 offsets, got 3}}
func.func private @short_rows() attributes {l = #dsc.block_layout<block = 2, heads = 1, blocks = 3, rows = [0, 1, 2], cols = [0, 1]>}

// -----

// expected-error @+1 {{query block 1 of layout head 0 attends to no key block}}
func.func private @empty_row() attributes {l = #dsc.block_layout<block = 2, heads = 1, blocks = 2, rows = [0, 1, 1], cols = [0]>}

// -----

// expected-error @+1 {{the key blocks of query block 0 of layout head 0 must ascend within [0, 2)}}
func.func private @unsorted() attributes {l = #dsc.block_layout<block = 2, heads = 1, blocks = 2, rows = [0, 2, 3], cols = [1, 0, 1]>}

// -----

// expected-error @+1 {{block layout rows must start at 0 and end at the number of cols (2), got 0 .. 3}}
func.func private @rows_past_cols() attributes {l = #dsc.block_layout<block = 2, heads = 1, blocks = 2, rows = [0, 1, 3], cols = [0, 1]>}

// -----

// expected-error @+1 {{block layout needs block, heads and blocks >= 1, got block = 0, heads = 1, blocks = 1}}
func.func private @zero_block() attributes {l = #dsc.block_layout<block = 0, heads = 1, blocks = 1, rows = [0, 1], cols = [0]>}

// -----

func.func @tokens(%q: tensor<1x2x6x2xf32>) {
  // expected-error @+1 {{'dsc.attention' op block layout covers 4 tokens (2 blocks of 2), the scores are 6 x 6}}
  %o, %l = dsc.attention %q, %q, %q {rate = 0.0 : f64, stream = 0 : i64, layout = #dsc.block_layout<block = 2, heads = 1, blocks = 2, rows = [0, 1, 2], cols = [0, 1]>} : (tensor<1x2x6x2xf32>, tensor<1x2x6x2xf32>, tensor<1x2x6x2xf32>) -> (tensor<1x2x6x2xf32>, tensor<1x2x6xf32>)
  return
}

// -----

func.func @heads(%q: tensor<1x2x4x2xf32>) {
  // expected-error @+1 {{'dsc.attention' op block layout has 3 heads, expected 1 or 2}}
  %o, %l = dsc.attention %q, %q, %q {rate = 0.0 : f64, stream = 0 : i64, layout = #dsc.block_layout<block = 2, heads = 3, blocks = 2, rows = [0, 1, 2, 3, 4, 5, 6], cols = [0, 1, 0, 1, 0, 1]>} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @future(%q: tensor<1x2x4x2xf32>) {
  // expected-error @+1 {{'dsc.attention' op causal attention needs a block-causal layout (no block above the diagonal)}}
  %o, %l = dsc.attention %q, %q, %q {causal = true, rate = 0.0 : f64, stream = 0 : i64, layout = #dsc.block_layout<block = 2, heads = 1, blocks = 2, rows = [0, 2, 3], cols = [0, 1, 1]>} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @softmax_rank(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'dsc.softmax' op a block layout needs scores [..., H, T, T], got [4, 4]}}
  %y = dsc.softmax %x {layout = #dsc.block_layout<block = 2, heads = 1, blocks = 2, rows = [0, 1, 2], cols = [0, 1]>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @grad_heads(%q: tensor<1x2x4x2xf32>, %l: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'dsc.attention_grad' op block layout has 3 heads, expected 1 or 2}}
  %a, %b, %c = dsc.attention_grad %q, %q, %q, %q, %q, %l {rate = 0.0 : f64, stream = 0 : i64, layout = #dsc.block_layout<block = 2, heads = 3, blocks = 2, rows = [0, 1, 2, 3, 4, 5, 6], cols = [0, 1, 0, 1, 0, 1]>} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>)
  return
}
