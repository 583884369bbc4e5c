"""Checks an fp16 --log-json against DeepSpeed's DynamicLossScaler.

argv: fp16 log, fp32 log of the same config without fp16, initial scale,
hysteresis, window, min scale. The logged loss_scale of every step must be
the cur_scale DeepSpeed's update_scale sequence gives for the logged
overflow flags, and the learning rate of step i must be the fp32 run's
learning rate after as many applied (not skipped) steps: skipped steps
advance neither the optimizer's step nor the LR scheduler.
"""
import json
import sys

log = [json.loads(l) for l in open(sys.argv[1])]
ref = [json.loads(l) for l in open(sys.argv[2])]
scale, hyst, window, min_scale = (float(sys.argv[3]), int(sys.argv[4]),
                                  int(sys.argv[5]), float(sys.argv[6]))
cur_iter, last_overflow, cur_hyst = 0, -1, hyst
applied = 0
for r in log:
    assert r['loss_scale'] == scale, (r, scale)
    assert r['lr'] == ref[applied]['lr'], (r, applied, ref[applied]['lr'])
    assert r['loss'] is not None, r
    if r['skipped']:
        assert r['grad_norm'] is None, r  # inf/NaN gradients
        if hyst == 1 or cur_hyst == 1:
            assert scale != min_scale
            scale = max(scale / 2, min_scale)
        else:
            cur_hyst -= 1
        last_overflow = cur_iter
    else:
        if (cur_iter - last_overflow) % window == 0:
            cur_hyst = hyst
            scale *= 2
        applied += 1
    cur_iter += 1
flags = ''.join('S' if r['skipped'] else '.' for r in log)
print('skips %s, %d applied, final scale %g' % (flags, applied, scale))
