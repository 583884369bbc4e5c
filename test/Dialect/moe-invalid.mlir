// RUN: dsc-opt %s -split-input-file -verify-diagnostics

func.func @topk_k_above_experts(%l: tensor<6x4xf32>) {
  // expected-error @+1 {{'dsc.moe_topk' op expects 1 <= k <= 4 (the experts), got k = 5}}
  %w, %e = dsc.moe_topk %l {k = 5 : i64} : (tensor<6x4xf32>) -> (tensor<6x5xf32>, tensor<6x5xi32>)
  return
}

// -----

func.func @topk_k_zero(%l: tensor<6x4xf32>) {
  // expected-error @+1 {{'dsc.moe_topk' op expects 1 <= k <= 4 (the experts), got k = 0}}
  %w, %e = dsc.moe_topk %l {k = 0 : i64} : (tensor<6x4xf32>) -> (tensor<6x0xf32>, tensor<6x0xi32>)
  return
}

// -----

func.func @topk_rank(%l: tensor<4xf32>) {
  // expected-error @+1 {{'dsc.moe_topk' op expects router logits [..., E] of rank >= 2 ([tokens..., width]), got [4]}}
  %w, %e = dsc.moe_topk %l {k = 2 : i64} : (tensor<4xf32>) -> (tensor<2xf32>, tensor<2xi32>)
  return
}

// -----

func.func @topk_weights_shape(%l: tensor<6x4xf32>) {
  // expected-error @+1 {{'dsc.moe_topk' op weights has shape [6, 3], expected [6, 2]}}
  %w, %e = dsc.moe_topk %l {k = 2 : i64} : (tensor<6x4xf32>) -> (tensor<6x3xf32>, tensor<6x2xi32>)
  return
}

// -----

func.func @topk_grad_experts(%w: tensor<6x2xf32>, %e: tensor<6x2xi32>) {
  // expected-error @+1 {{'dsc.moe_topk_grad' op result [6, 1] has fewer experts than the 2 chosen}}
  %d = dsc.moe_topk_grad %w, %w, %e : (tensor<6x2xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x1xf32>
  return
}

// -----

func.func @route_no_experts(%e: tensor<6x2xi32>) {
  // expected-error @+1 {{'dsc.moe_route' op expects num_experts >= 1, got 0}}
  %s, %c = dsc.moe_route %e {num_experts = 0 : i64} : (tensor<6x2xi32>) -> (tensor<6x2xi32>, tensor<0xi32>)
  return
}

// -----

func.func @route_counts(%e: tensor<6x2xi32>) {
  // expected-error @+1 {{'dsc.moe_route' op counts has shape [3], expected [4]}}
  %s, %c = dsc.moe_route %e {num_experts = 4 : i64} : (tensor<6x2xi32>) -> (tensor<6x2xi32>, tensor<3xi32>)
  return
}

// -----

func.func @dispatch_rows(%x: tensor<6x8xf32>, %s: tensor<6x2xi32>) {
  // expected-error @+1 {{'dsc.moe_dispatch' op expects one expert row per slot: [6, 2] slots for 10 rows}}
  %r = dsc.moe_dispatch %x, %s : (tensor<6x8xf32>, tensor<6x2xi32>) -> tensor<10x8xf32>
  return
}

// -----

func.func @dispatch_tokens(%x: tensor<6x8xf32>, %s: tensor<5x2xi32>) {
  // expected-error @+1 {{'dsc.moe_dispatch' op slots has shape [5, 2], expected [6, 2]}}
  %r = dsc.moe_dispatch %x, %s : (tensor<6x8xf32>, tensor<5x2xi32>) -> tensor<10x8xf32>
  return
}

// -----

func.func @dispatch_width(%x: tensor<6x8xf32>, %s: tensor<6x2xi32>) {
  // expected-error @+1 {{'dsc.moe_dispatch' op rows [12, 7] and input [6, 8] differ in width}}
  %r = dsc.moe_dispatch %x, %s : (tensor<6x8xf32>, tensor<6x2xi32>) -> tensor<12x7xf32>
  return
}

// -----

func.func @dispatch_weights(%x: tensor<6x8xf32>, %s: tensor<6x2xi32>, %w: tensor<6x3xf32>) {
  // expected-error @+1 {{'dsc.moe_dispatch' op weights has shape [6, 3], expected [6, 2]}}
  %r = dsc.moe_dispatch %x, %s, %w : (tensor<6x8xf32>, tensor<6x2xi32>, tensor<6x3xf32>) -> tensor<12x8xf32>
  return
}

// -----

func.func @combine_rows_rank(%r: tensor<12x8x1xf32>, %s: tensor<6x2xi32>) {
  // expected-error @+1 {{'dsc.moe_combine' op expects expert rows [N*K, C] of rank 2, got [12, 8, 1]}}
  %y = dsc.moe_combine %r, %s : (tensor<12x8x1xf32>, tensor<6x2xi32>) -> tensor<6x8xf32>
  return
}

// -----

func.func @combine_result(%r: tensor<12x8xf32>, %s: tensor<2x3x2xi32>) {
  // expected-error @+1 {{'dsc.moe_combine' op result has shape [6, 8], expected [2, 3, 8]}}
  %y = dsc.moe_combine %r, %s : (tensor<12x8xf32>, tensor<2x3x2xi32>) -> tensor<6x8xf32>
  return
}

// -----

func.func @slot_dot_width(%x: tensor<6x4xf32>, %r: tensor<12x8xf32>, %s: tensor<6x2xi32>) {
  // expected-error @+1 {{'dsc.moe_slot_dot' op rows [12, 8] and input [6, 4] differ in width}}
  %d = dsc.moe_slot_dot %x, %r, %s : (tensor<6x4xf32>, tensor<12x8xf32>, tensor<6x2xi32>) -> tensor<6x2xf32>
  return
}

// -----

func.func @grouped_counts(%x: tensor<12x8xf32>, %w: tensor<24x8xf32>, %c: tensor<2x2xi32>) {
  // expected-error @+1 {{'dsc.grouped_linear' op expects counts [E], got [2, 2]}}
  %y = dsc.grouped_linear %x, %w, %c {transpose_w = true} : (tensor<12x8xf32>, tensor<24x8xf32>, tensor<2x2xi32>) -> tensor<12x6xf32>
  return
}

// -----

func.func @grouped_stack(%x: tensor<12x8xf32>, %w: tensor<22x8xf32>, %c: tensor<4xi32>) {
  // expected-error @+1 {{'dsc.grouped_linear' op weight [22, 8] does not stack 4 experts' matrices along dimension 0}}
  %y = dsc.grouped_linear %x, %w, %c {transpose_w = true} : (tensor<12x8xf32>, tensor<22x8xf32>, tensor<4xi32>) -> tensor<12x6xf32>
  return
}

// -----

func.func @grouped_weight_rank(%x: tensor<12x8xf32>, %w: tensor<4x6x8xf32>, %c: tensor<4xi32>) {
  // expected-error @+1 {{'dsc.grouped_linear' op expects a rank-2 weight, got [4, 6, 8]}}
  %y = dsc.grouped_linear %x, %w, %c {transpose_w = true} : (tensor<12x8xf32>, tensor<4x6x8xf32>, tensor<4xi32>) -> tensor<12x6xf32>
  return
}

// -----

func.func @grouped_input(%x: tensor<12x7xf32>, %w: tensor<24x8xf32>, %c: tensor<4xi32>) {
  // expected-error @+1 {{'dsc.grouped_linear' op input [12, 7] does not match the experts' weight [24, 8] (transpose_w)}}
  %y = dsc.grouped_linear %x, %w, %c {transpose_w = true} : (tensor<12x7xf32>, tensor<24x8xf32>, tensor<4xi32>) -> tensor<12x6xf32>
  return
}

// -----

func.func @grouped_input_rank(%x: tensor<2x6x8xf32>, %w: tensor<24x8xf32>, %c: tensor<4xi32>) {
  // expected-error @+1 {{'dsc.grouped_linear' op expects input [S, K] of rank 2, got [2, 6, 8]}}
  %y = dsc.grouped_linear %x, %w, %c {transpose_w = true} : (tensor<2x6x8xf32>, tensor<24x8xf32>, tensor<4xi32>) -> tensor<2x6x6xf32>
  return
}

// -----

func.func @grouped_result(%x: tensor<12x8xf32>, %w: tensor<24x8xf32>, %c: tensor<4xi32>) {
  // expected-error @+1 {{'dsc.grouped_linear' op result has shape [12, 8], expected [12, 6]}}
  %y = dsc.grouped_linear %x, %w, %c {transpose_w = true} : (tensor<12x8xf32>, tensor<24x8xf32>, tensor<4xi32>) -> tensor<12x8xf32>
  return
}

// -----

func.func @grouped_grad_weight(%x: tensor<12x8xf32>, %dy: tensor<12x5xf32>, %c: tensor<4xi32>) {
  // expected-error @+1 {{'dsc.grouped_linear_grad_weight' op input [12, 8] and grad [12, 5] do not match the weight gradient [24, 8] (transpose_w)}}
  %d = dsc.grouped_linear_grad_weight %x, %dy, %c {transpose_w = true} : (tensor<12x8xf32>, tensor<12x5xf32>, tensor<4xi32>) -> tensor<24x8xf32>
  return
}

// -----

func.func @load_tokens(%l: tensor<6x4xf32>, %e: tensor<5x2xi32>) {
  // expected-error @+1 {{'dsc.moe_load' op experts has shape [5, 2], expected [6, 2]}}
  %load = dsc.moe_load %l, %e : (tensor<6x4xf32>, tensor<5x2xi32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @load_half(%l: tensor<6x4xf32>, %e: tensor<6x2xi32>) {
  // expected-error @+1 {{'dsc.moe_load' op expects an f32 load (token counts are exact in f32)}}
  %load = dsc.moe_load %l, %e : (tensor<6x4xf32>, tensor<6x2xi32>) -> tensor<2x4xbf16>
  return
}

// -----

func.func @load_grad_shape(%d: tensor<2x5xf32>, %l: tensor<6x4xf32>) {
  // expected-error @+1 {{'dsc.moe_load_grad' op grad has shape [2, 5], expected [2, 4]}}
  %g = dsc.moe_load_grad %d, %l : (tensor<2x5xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  return
}

// -----

func.func @balance_no_layers() {
  // expected-error @+1 {{'dsc.moe_balance_loss' op expects the load of at least one layer}}
  %aux = dsc.moe_balance_loss {scale = 1.0 : f64} : () -> tensor<f32>
  return
}

// -----

func.func @balance_load_shape(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'dsc.moe_balance_loss' op expects loads of shape [2, E], got [3, 4]}}
  %aux = dsc.moe_balance_loss %a {scale = 1.0 : f64} : (tensor<3x4xf32>) -> tensor<f32>
  return
}

// -----

func.func @balance_loads_differ(%a: tensor<2x4xf32>, %b: tensor<2x5xf32>) {
  // expected-error @+1 {{'dsc.moe_balance_loss' op every load has shape [2, 5], expected [2, 4]}}
  %aux = dsc.moe_balance_loss %a, %b {scale = 1.0 : f64} : (tensor<2x4xf32>, tensor<2x5xf32>) -> tensor<f32>
  return
}

// -----

func.func @balance_grad_result(%g: tensor<f32>, %a: tensor<2x4xf32>) {
  // expected-error @+1 {{'dsc.moe_balance_loss_grad' op result has shape [2, 5], expected [2, 4]}}
  %d = dsc.moe_balance_loss_grad %g, %a {scale = 1.0 : f64} : (tensor<f32>, tensor<2x4xf32>) -> tensor<2x5xf32>
  return
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 1>, dsc.mesh_data_inner = 2 : i64} {
func.func @exchange_experts_indivisible(%c: tensor<3xi32>) {
  // expected-error @+1 {{'dsc.moe_exchange_counts' op the 3 experts do not divide over the 2 ranks of axis data_inner}}
  %rc, %lc = dsc.moe_exchange_counts %c : (tensor<3xi32>) -> (tensor<2x1xi32>, tensor<1xi32>)
  return
}
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 1>, dsc.mesh_data_inner = 2 : i64} {
func.func @exchange_local_counts(%c: tensor<4xi32>) {
  // expected-error @+1 {{'dsc.moe_exchange_counts' op local_counts has shape [4], expected [2]}}
  %rc, %lc = dsc.moe_exchange_counts %c : (tensor<4xi32>) -> (tensor<2x2xi32>, tensor<4xi32>)
  return
}
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 1>, dsc.mesh_data_inner = 2 : i64} {
func.func @exchange_recv_counts(%r: tensor<8x4xf32>, %c: tensor<4xi32>, %rc: tensor<4x1xi32>) {
  // expected-error @+1 {{'dsc.moe_exchange' op recv_counts has shape [4, 1], expected [2, 2]}}
  %o = dsc.moe_exchange %r, %c, %rc : (tensor<8x4xf32>, tensor<4xi32>, tensor<4x1xi32>) -> tensor<16x4xf32>
  return
}
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 1>, dsc.mesh_data_inner = 2 : i64} {
func.func @exchange_width(%r: tensor<8x4xf32>, %c: tensor<4xi32>, %rc: tensor<2x2xi32>) {
  // expected-error @+1 {{'dsc.moe_exchange' op rows 'tensor<8x4xf32>' and result 'tensor<16x5xf32>' differ in width or element type}}
  %o = dsc.moe_exchange %r, %c, %rc : (tensor<8x4xf32>, tensor<4xi32>, tensor<2x2xi32>) -> tensor<16x5xf32>
  return
}
}

// -----

// expected-error @+1 {{'dsc.mesh_expert' must be an integer on the module equal to its 'dsc.mesh_data_inner' (expert-parallel groups are the data_inner groups)}}
module attributes {dsc.mesh = #dsc.mesh<data = 4, tensor = 1, pipeline = 1>, dsc.mesh_data_inner = 2 : i64, dsc.mesh_expert = 4 : i64} {
}

// -----

func.func @route_negative_capacity(%e: tensor<6x2xi32>) {
  // expected-error @+1 {{'dsc.moe_route' op expects capacity >= 0 (0: no token dropping), got -1}}
  %s, %c = dsc.moe_route %e {num_experts = 4 : i64, capacity = -1 : i64} : (tensor<6x2xi32>) -> (tensor<6x2xi32>, tensor<4xi32>)
  return
}
