// Results written over an argument's buffer (LowerToProgram's overArgument:
// an all-reduce over an argument it is the only reader of) only where the
// argument's state is rewritten after the result's last use, once:
// @copied: state "a" is rewritten by a copy after the body, and the result
//   itself is copied into state "c" (it must not live in "a"'s buffer,
//   which the copy into "a" overwrites first); @show prints "c".
// @twice: state "a" returned twice (written in place and copied), with the
//   result read after the in-place writer.
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 1, pipeline = 1>} {
func.func @copied(%a: tensor<4xf32> {dsc.state = #dsc.state<param, "a">},
                  %c: tensor<4xf32> {dsc.state = #dsc.state<param, "c">},
                  %z: tensor<4xf32> {dsc.state = #dsc.state<grad, "a">})
    -> (tensor<4xf32> {dsc.state = #dsc.state<param, "a">},
        tensor<4xf32> {dsc.state = #dsc.state<param, "c">},
        tensor<4xf32> {dsc.state = #dsc.state<output, "c_before">}) {
  %r = dsc.all_reduce %a : (tensor<4xf32>) -> tensor<4xf32>
  %k = dsc.all_reduce %c : (tensor<4xf32>) -> tensor<4xf32>
  return %z, %r, %k : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
func.func @show(%c: tensor<4xf32> {dsc.state = #dsc.state<param, "c">})
    -> (tensor<4xf32> {dsc.state = #dsc.state<output, "c_after">}) {
  %x = dsc.all_reduce %c : (tensor<4xf32>) -> tensor<4xf32>
  return %x : tensor<4xf32>
}
func.func @twice(%a: tensor<4xf32> {dsc.state = #dsc.state<param, "a">})
    -> (tensor<4xf32> {dsc.state = #dsc.state<param, "a">},
        tensor<4xf32> {dsc.state = #dsc.state<param, "a">},
        tensor<4xf32> {dsc.state = #dsc.state<output, "reduced_after_fill">}) {
  %r = dsc.all_reduce %a : (tensor<4xf32>) -> tensor<4xf32>
  %zero = dsc.fill {value = 0.0 : f64} : () -> tensor<4xf32>
  %k = dsc.all_reduce %r : (tensor<4xf32>) -> tensor<4xf32>
  return %zero, %zero, %k : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
}
