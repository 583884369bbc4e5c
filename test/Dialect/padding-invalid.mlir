// RUN: dsc-opt %s -split-input-file -verify-diagnostics

// Key padding masks: [B, Tk] i32, B the scores' (or heads') batch.

func.func @softmax_mask_shape(%s: tensor<2x3x4x4xf32>, %m: tensor<2x5xi32>) {
  // expected-error @+1 {{'dsc.softmax' op key_mask [2, 5] must be [B, Tk] = [2, 4]}}
  %p = dsc.softmax %s, %m : (tensor<2x3x4x4xf32>, tensor<2x5xi32>) -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @softmax_mask_rank(%s: tensor<4x4xf32>, %m: tensor<4x4xi32>) {
  // expected-error @+1 {{'dsc.softmax' op a key_mask needs scores [B, ..., Tq, Tk], got [4, 4]}}
  %p = dsc.softmax %s, %m : (tensor<4x4xf32>, tensor<4x4xi32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @softmax_dropout_mask_batch(%s: tensor<2x3x4x4xf32>, %m: tensor<1x4xi32>) {
  // expected-error @+1 {{'dsc.softmax_dropout' op key_mask [1, 4] must be [B, Tk] = [2, 4]}}
  %d, %p = dsc.softmax_dropout %s, %m {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x4x4xf32>, tensor<1x4xi32>) -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>)
  return
}

// -----

func.func @attention_mask_shape(%q: tensor<2x2x6x4xf32>, %m: tensor<2x3x6xi32>) {
  // expected-error @+1 {{'dsc.attention' op key_mask [2, 3, 6] must be [B, Tk] = [2, 6]}}
  %o, %l = dsc.attention %q, %q, %q, %m {rate = 0.0 : f64, stream = 0 : i64} : (tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>, tensor<2x3x6xi32>) -> (tensor<2x2x6x4xf32>, tensor<2x2x6xf32>)
  return
}

// -----

func.func @attention_mask_type(%q: tensor<2x2x6x4xf32>, %m: tensor<2x6xf32>) {
  // expected-error @+1 {{'dsc.attention' op operand #3 must be ranked tensor of 32-bit signless integer values}}
  %o, %l = dsc.attention %q, %q, %q, %m {rate = 0.0 : f64, stream = 0 : i64} : (tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>, tensor<2x6xf32>) -> (tensor<2x2x6x4xf32>, tensor<2x2x6xf32>)
  return
}

// -----

func.func @attention_grad_mask(%q: tensor<2x2x6x4xf32>, %lse: tensor<2x2x6xf32>, %m: tensor<3x6xi32>) {
  // expected-error @+1 {{'dsc.attention_grad' op key_mask [3, 6] must be [B, Tk] = [2, 6]}}
  %dq, %dk, %dv = dsc.attention_grad %q, %q, %q, %q, %q, %lse, %m {rate = 0.0 : f64, stream = 0 : i64} : (tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6xf32>, tensor<3x6xi32>) -> (tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>)
  return
}

// -----

func.func @padding_mask_pad(%ids: tensor<2x6xi32>) {
  // expected-error @+1 {{'dsc.padding_mask' op expects pad_token_id >= 0, got -1}}
  %m = dsc.padding_mask %ids {pad_token_id = -1 : i64} : (tensor<2x6xi32>) -> tensor<2x6xi32>
  return
}

// -----

func.func @padding_mask_shape(%ids: tensor<2x6xi32>) {
  // expected-error @+1 {{'dsc.padding_mask' op requires the same shape for all operands and results}}
  %m = dsc.padding_mask %ids {pad_token_id = 0 : i64} : (tensor<2x6xi32>) -> tensor<2x5xi32>
  return
}
