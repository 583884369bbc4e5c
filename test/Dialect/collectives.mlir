// RUN: dsc-opt %s | FileCheck %s
// RUN: dsc-opt %s | dsc-opt | FileCheck %s
// RUN: dsc-opt %s --mlir-print-op-generic | dsc-opt | FileCheck %s
// RUN: dsc-opt %s -cse -canonicalize | FileCheck %s --check-prefix=EFFECTS

// The collectives on a 4 x 2 x 2 mesh: shapes follow each axis's group
// size (data 4, tensor 2, pipeline 2).

// CHECK: module attributes {dsc.mesh = #dsc.mesh<data = 4, tensor = 2, pipeline = 2>}
module attributes {dsc.mesh = #dsc.mesh<data = 4, tensor = 2, pipeline = 2>} {
  // CHECK-LABEL: func @collectives
  func.func @collectives(%g: tensor<8x3xf32>, %p: tensor<2x3xbf16>) -> (tensor<8x3xf32>, tensor<2x3xf32>, tensor<8x3xbf16>, tensor<2x3xbf16>, tensor<8x3xf32>, tensor<8x3xf32>, tensor<4x3xf32>) {
    // CHECK: dsc.all_reduce %{{.*}} {axis = #dsc<axis tensor>, op = #dsc<reduce max>}
    %a = dsc.all_reduce %g {op = #dsc<reduce max>, axis = #dsc<axis tensor>} : (tensor<8x3xf32>) -> tensor<8x3xf32>
    // CHECK: dsc.reduce_scatter %{{.*}} : (tensor<8x3xf32>) -> tensor<2x3xf32>
    %r = dsc.reduce_scatter %g : (tensor<8x3xf32>) -> tensor<2x3xf32>
    // CHECK: dsc.all_gather %{{.*}} : (tensor<2x3xbf16>) -> tensor<8x3xbf16>
    %ag = dsc.all_gather %p : (tensor<2x3xbf16>) -> tensor<8x3xbf16>
    // CHECK: dsc.broadcast %{{.*}} {root = 3 : i64} : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
    %b = dsc.broadcast %p {root = 3} : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
    // CHECK: dsc.all_to_all %{{.*}} {axis = #dsc<axis tensor>} : (tensor<8x3xf32>) -> tensor<8x3xf32>
    %t = dsc.all_to_all %g {axis = #dsc<axis tensor>} : (tensor<8x3xf32>) -> tensor<8x3xf32>
    // CHECK: dsc.send %{{.*}} {peer = 1 : i64} : (tensor<8x3xf32>) -> ()
    dsc.send %g {peer = 1} : (tensor<8x3xf32>) -> ()
    // CHECK: dsc.recv {peer = -1 : i64} : () -> tensor<8x3xf32>
    %v = dsc.recv {peer = -1} : () -> tensor<8x3xf32>
    // CHECK: dsc.reduce_scatter %{{.*}} {axis = #dsc<axis pipeline>, op = #dsc<reduce sum>} : (tensor<8x3xf32>) -> tensor<4x3xf32>
    %rp = dsc.reduce_scatter %g {op = #dsc<reduce sum>, axis = #dsc<axis pipeline>} : (tensor<8x3xf32>) -> tensor<4x3xf32>
    return %a, %r, %ag, %b, %t, %v, %rp : tensor<8x3xf32>, tensor<2x3xf32>, tensor<8x3xbf16>, tensor<2x3xbf16>, tensor<8x3xf32>, tensor<8x3xf32>, tensor<4x3xf32>
  }

  // Every rank must issue every collective: none is dropped or merged, even
  // when its result is unused or equal to another's.
  // EFFECTS-LABEL: func @unused
  // EFFECTS-NEXT: dsc.all_gather
  // EFFECTS-NEXT: dsc.all_gather
  // EFFECTS-NEXT: dsc.recv
  // EFFECTS-NEXT: dsc.broadcast
  // EFFECTS-NEXT: return
  func.func @unused(%p: tensor<2x3xf32>) {
    %a = dsc.all_gather %p : (tensor<2x3xf32>) -> tensor<8x3xf32>
    %b = dsc.all_gather %p : (tensor<2x3xf32>) -> tensor<8x3xf32>
    %v = dsc.recv {peer = 1} : () -> tensor<8x3xf32>
    %c = dsc.broadcast %p {root = 0} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return
  }
}
