r"""`make bench`: every benchmark side by side in one run, into RESULTS.md.

Each measurement runs in its own process (`bench/<script>.py --json`), one
after another, so they share the machine in the same conditions and peak
memory is per process. Ratios are formed from figures of this one run.

  .venv/bin/python bench/run_all.py [--skip_demo] [--skip_bfloat16_demo]
      [--skip_bfloat16_inference]
      [--skip_peer] [--skip_original] [--original_rounds=N]
      [--orig_python=PATH]
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(BENCH, 'out')
PY = sys.executable


def run(script, *flags):
  """Runs bench/<script> with --json; returns its RESULT dict (or error)."""
  command = [PY, os.path.join(BENCH, script), '--json'] + list(flags)
  print('$ ' + ' '.join(command[1:]), flush=True)
  start = time.perf_counter()
  result = subprocess.run(command, capture_output=True, text=True,
                          check=False)
  lines = [l for l in result.stdout.splitlines() if l.startswith('RESULT ')]
  if result.returncode or not lines:
    tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
    print('  failed (exit %d): %s' % (result.returncode, ' | '.join(tail)))
    return {'error': ' | '.join(tail) or 'exit %d' % result.returncode}
  figures = json.loads(lines[-1][len('RESULT '):])
  figures['item_seconds'] = time.perf_counter() - start
  print('  %s  (%.0f s)' % (figures, figures['item_seconds']), flush=True)
  return figures


def _measured(flag, figures):
  """[flag=JSON of a step's figures] to reuse them, or [] after an error."""
  keys = ('images_per_s', 'images_per_cpu_s', 'peak_rss_mb')
  if any(key not in figures for key in keys):
    return []
  return ['%s=%s' % (flag, json.dumps({key: figures[key] for key in keys}))]


def _fmt(value, digits=2):
  if value is None:
    return 'n/a'
  if isinstance(value, float):
    return '%.*f' % (digits, value)
  return str(value)


def _ratio(numerator, denominator, key='images_per_s'):
  try:
    return numerator[key] / denominator[key]
  except (KeyError, TypeError, ZeroDivisionError):
    return None


def _verdict(value, goal):
  return 'n/a' if value is None else ('met' if value >= goal else 'not met')


def _reported(value):
  return 'n/a' if value is None else 'reported'


def measure(args):
  data = os.path.join(OUT, 'data300')
  data_small = os.path.join(OUT, 'data160')
  data_peer = os.path.join(OUT, 'data256')
  data_frcnn = os.path.join(OUT, 'data320')
  large = ['--data_dir=' + data, '--size=300', '--depth=1.0', '--batch=8']
  small = ['--data_dir=' + data_small, '--size=160', '--depth=0.35',
           '--batch=16']
  # Few steps: a Faster R-CNN ResNet-50 step at 320 pixels takes seconds,
  # and make bench must stay under 30 minutes on 2 cores. Two warm-up
  # steps: the Estimator's second step is still slow (0.65 of the ceiling
  # timed after one, 0.96 after two, same load).
  frcnn = ['--data_dir=' + data_frcnn, '--size=320', '--batch=1',
           '--arch=faster_rcnn', '--warmup=2', '--steps=4']
  r = {}
  r['train'] = run('train_step.py', '--mode=estimator', *large)
  # Item 11: the same steps with --bfloat16, each next to its float32 run.
  r['bfloat16'] = run('train_step.py', '--mode=estimator', '--bfloat16',
                      *large)
  r['ceiling'] = run('train_step.py', '--mode=ceiling', *large)
  # Item 1b: the small step (~0.25 s) and its ceiling in turns of 10 steps,
  # 8 turns each (one after the other, 40 steps each, the ceiling swung
  # item 1b: 1.22 and 0.87 in two idle runs). Items 4c and 5b reuse our side.
  r['interleaved_small'] = run('interleaved_ceiling.py', *small)
  r['train_small'] = r['interleaved_small'].get('ours', {})
  r['ceiling_small'] = r['interleaved_small'].get('ceiling', {})
  r['train_frcnn'] = run('train_step.py', '--mode=estimator', *frcnn)
  r['bfloat16_frcnn'] = run('train_step.py', '--mode=estimator',
                            '--bfloat16', *frcnn)
  r['ceiling_frcnn'] = run('train_step.py', '--mode=ceiling', *frcnn)
  # Item 11c: exported SavedModels --bfloat16 / float32, one image a call
  # (~100 CPU s, the four exports most of it).
  skipped = {'skipped': '--skip_bfloat16_inference'}
  r['bfloat16_inference'] = skipped if args.skip_bfloat16_inference else run(
      'bfloat16_inference.py', '--data_dir=' + data, '--size=300')
  r['bfloat16_inference_frcnn'] = (
      skipped if args.skip_bfloat16_inference else run(
          'bfloat16_inference.py', '--arch=faster_rcnn',
          '--data_dir=' + data_frcnn, '--size=320', '--images=4',
          '--warmup=1'))
  # R-FCN: item 1c's records, size, batch and body; its own second stage.
  # Ten timed steps (~0.5 s each): the ratio sits near its goal.
  rfcn = [arg.replace('=faster_rcnn', '=rfcn').replace('--steps=4',
                                                        '--steps=10')
          for arg in frcnn]
  r['train_rfcn'] = run('train_step.py', '--mode=estimator', *rfcn)
  r['ceiling_rfcn'] = run('train_step.py', '--mode=ceiling', *rfcn)
  # Item 1e: EfficientDet-D0 (the original's TF2 config, 512x512, batch 4)
  # and EfficientNet-B0 alone, in one process.
  r['train_d0'] = run('efficientdet_step.py', *EFFICIENTDET_D0)
  r['input'] = run('input_pipeline.py', '--batch=8', '--repeats=2',
                   '--num_images=200')
  r['coco'] = run('coco_eval.py')
  r['coco_masks'] = run('coco_mask_eval.py')
  r['export'] = run('export_inference.py', '--data_dir=' + data,
                    '--size=300', '--depth=1.0')
  # Item 12: our exports against the original's TF2 exports (its
  # environment as item 10's; its exports cached in bench/out).
  for row, data_dir, size in (('ssd_mobilenet_v2', data, 300),
                              ('faster_rcnn_keras', data_frcnn, 320)):
    r['orig_inference_' + row] = (
        {'skipped': '--skip_original'} if args.skip_original else run(
            'orig_inference.py', '--row=' + row, '--data_dir=' + data_dir,
            '--size=%d' % size, *ORIG_INFERENCE_FLAGS[row],
            *(['--orig_python=' + args.orig_python] if args.orig_python
              else [])))
  # Goal 5: the small config's step with --xla (item 1b without it); XLA
  # compiling its clusters is most of this item's minutes.
  r['xla_small'] = run('xla_step.py', '--mode=estimator', '--steps=5',
                       *small)
  # Goal 6: bench/scaling.png (training by batch, evaluation by images);
  # its batch 8 is item 1's step (same config, timed over more steps).
  r['scaling'] = run('scaling.py', '--data_dir=' + data, '--size=300',
                     '--depth=1.0', '--measured_batch=8',
                     *_measured('--measured_step', r['train']))
  r['eval'] = run('train_step.py', '--mode=eval', *large)
  # Quantization-aware training step vs float (item 1b's step); uint8 vs
  # float .tflite.
  r['quantized'] = run('quantized_step.py', *small,
                       *_measured('--float_step', r['train_small']))
  r['demo'] = ({'skipped': '--skip_demo'} if args.skip_demo else
               run('demo_time.py'))
  # Item 11: make demo's checkpoint evaluated with --bfloat16 (~30 s), the
  # same checkpoint item 6's float32 evaluation scored.
  r['demo_bfloat16_eval'] = ({'skipped': '--skip_demo'} if args.skip_demo
                             else run('demo_time.py', '--bfloat16_eval'))
  # Item 11: the demo's training and evaluation again with --bfloat16.
  # ~200 s idle: --skip_bfloat16_demo leaves it out.
  r['demo_bfloat16'] = (
      {'skipped': '--skip_demo'} if args.skip_demo or
      args.skip_bfloat16_demo else run('demo_time.py', '--bfloat16'))
  r['peer'] = ({'skipped': '--skip_peer'} if args.skip_peer else
               run('peer_model_garden.py', '--data_dir=' + data_peer))
  # Item 8's side of ours is item 1c's step (same records, size, batch).
  r['peer_frcnn'] = ({'skipped': '--skip_peer'} if args.skip_peer else
                     run('peer_model_garden.py', '--arch=faster_rcnn',
                         '--data_dir=' + data_frcnn, '--size=320',
                         '--batch=1', '--steps=3',
                         *_measured('--ours', r['train_frcnn'])))
  # Item 8's records carry PNG masks (create_synthetic_tf_record's default).
  r['peer_mask_rcnn'] = ({'skipped': '--skip_peer'} if args.skip_peer else
                         run('peer_model_garden.py', '--arch=mask_rcnn',
                             '--data_dir=' + data_frcnn, '--size=320',
                             '--batch=1', '--steps=3'))
  r.update(measure_original(args, r, large, frcnn))
  return r


# Item 1e's and 10e's records, size and batch (bench/efficientdet.py).
EFFICIENTDET_D0 = ['--data_dir=' + os.path.join(OUT, 'data512'), '--size=512',
                   '--batch=4', '--warmup=2', '--steps=4']


def measure_original(args, r, large, frcnn):
  """Item 10: the original's TF2 trainer against ours.

  With --original_rounds=1 (make bench's ~30 minutes) our side of rows
  10a-c is items 1 and 1c (the same configs, records, size and batch) and
  only the original runs; with more rounds the two alternate, each row's
  ratio the rounds' median.
  """
  if args.skip_original:
    return {'orig_' + row: {'skipped': '--skip_original'}
            for row in ORIGINAL_ROWS}
  flags = ['--rounds=%d' % args.original_rounds] + (
      ['--orig_python=' + args.orig_python] if args.orig_python else [])
  ours = {'ssd_mobilenet_v2': r['train'], 'faster_rcnn': r['train_frcnn'],
          'faster_rcnn_matched': r['train_frcnn'],
          'efficientdet_d0': r['train_d0']}
  return {'orig_' + row: run(
      'peer_original.py', '--row=' + row, *flags, *shape,
      *(_measured('--ours', ours[row])
        if args.original_rounds == 1 and row in ours else []))
          for row, shape in (
              ('ssd_mobilenet_v2', large + ['--warmup=3', '--steps=10']),
              ('faster_rcnn', frcnn), ('faster_rcnn_matched', frcnn),
              ('faster_rcnn_keras', frcnn),
              ('efficientdet_d0', EFFICIENTDET_D0))}


# Item 10's rows: the original's TF2 trainer against ours, with a goal
# where both sides run the same network.
ORIGINAL_ROWS = {
    'ssd_mobilenet_v2': ('10a. Original\'s TF2 trainer: SSD MobileNetV2 '
                         '(300x300, batch 8; ours TF1 extractor, theirs '
                         'ssd_mobilenet_v2_keras, same config otherwise)',
                         1.2),
    'faster_rcnn': ('10b. Original\'s TF2 trainer: Faster R-CNN ResNet-50 '
                    'as each ships it (320x320, batch 1; ours conv5 stride '
                    '1, theirs faster_rcnn_resnet50_keras, conv5 stride 2: '
                    'a third of the conv5 work)', None),
    'faster_rcnn_matched': ('10c. Same, the work matched (theirs on 14x14 '
                            'crops unpooled, so its stride-2 conv5 runs at '
                            'our 7x7)', 1.2),
    'faster_rcnn_keras': ('10d. Original\'s TF2 trainer: the TF2 Faster '
                          'R-CNN ResNet-50 Keras config on both sides, '
                          'nothing changed (320x320, batch 1)', 1.2),
    'efficientdet_d0': ('10e. Original\'s TF2 trainer: the TF2 '
                        'EfficientDet-D0 config on both sides, nothing '
                        'changed (512x512, batch 4; float32 both)', 1.2),
}


def _original_rows(r):
  """Item 10's table rows, goals per CPU second (steadier under load)."""
  rows = []
  for row, (title, goal) in ORIGINAL_ROWS.items():
    figures = r['orig_' + row]
    measured = figures.get('summary', json.dumps(figures))
    if goal is None:
      rows.append((title, measured, 'none (another network)', 'reported'))
    else:
      rows.append((title, measured, '>= %s per CPU second' % goal,
                   _verdict(figures.get('cpu_ratio'), goal)))
  return rows


# Item 12's rows and flags (a Faster R-CNN image takes seconds: fewer).
ORIGINAL_INFERENCE_TITLES = {
    'ssd_mobilenet_v2': '12a. Exported SavedModel, ours / the original\'s '
                        'TF2 export of the same checkpoint (SSD MobileNetV2 '
                        'Keras, 300x300)',
    'faster_rcnn_keras': '12b. Same, Faster R-CNN ResNet-50 Keras (the TF2 '
                         '640x640 config at 320x320)',
}
# Faster R-CNN: one round (an image is ~1.7 CPU s a side; its per CPU
# second ratio read 0.96-0.99 in every run), to keep make bench in 30 min.
ORIG_INFERENCE_FLAGS = {
    'ssd_mobilenet_v2': ['--images=16', '--batch=4', '--rounds=2'],
    'faster_rcnn_keras': ['--images=4', '--batch=2', '--rounds=1'],
}


def _original_inference_rows(r):
  """Item 12's rows, goals per CPU second: one image at a time and
  batched, each >= 1.2."""
  rows = []
  for row, title in ORIGINAL_INFERENCE_TITLES.items():
    figures = r['orig_inference_' + row]
    ratios = [figures.get(prefix + 'ours_cpu_ratio')
              for prefix in ('', 'batched_')]
    rows.append((title, figures.get('summary', json.dumps(figures)),
                 '>= 1.2 per CPU second, one at a time and batched',
                 'n/a' if None in ratios else _verdict(min(ratios), 1.2)))
  return rows


def _interleaved_row(r):
  """Item 1b: ours / the ceiling, their turns interleaved."""
  figures = r['interleaved_small']
  return ('1b. Same, small config (depth 0.35, 160x160, batch 16), the two '
          'interleaved (%s turns of %s steps each)' % (
              figures.get('turns'), figures.get('steps_a_turn')),
          '%s / %s images/s = %s; median of the turn pairs %s (%s); per CPU '
          'second %s' % (
              _fmt(r['train_small'].get('images_per_s')),
              _fmt(r['ceiling_small'].get('images_per_s')),
              _fmt(figures.get('ratio')), _fmt(figures.get('median_ratio')),
              ', '.join('%.2f' % x for x in figures.get('pair_ratios', [])),
              _fmt(figures.get('cpu_ratio'))),
          '>= 0.9 (median)', _verdict(figures.get('median_ratio'), 0.9))


# The demo's float32 mAP@.5 from run to run (bench/NOTES.md, item 11: whole
# make demo trainings, 2026-11-30), next to item 11's one bfloat16 training.
DEMO_FLOAT32_SPREAD = '0.647-0.725 in 5 runs'


def _bfloat16_demo_rows(r):
  """Item 11: the demo's mAP@.5 with --bfloat16 and without: evaluation of
  item 6's checkpoint (bfloat16 inference alone), then training too."""
  float32 = r['demo'].get('mAP@.5')
  rows = []
  for key, title, spread in (
      ('demo_bfloat16_eval', "`make demo`'s checkpoint (item 6) evaluated "
       'with --bfloat16 / float32: mAP@.5 (bfloat16 inference alone)', ''),
      ('demo_bfloat16', '`make demo` trained and evaluated with --bfloat16 '
       '/ float32 (item 6): mAP@.5',
       '; one training run each, float32 alone ranged %s '
       '(NOTES)' % DEMO_FLOAT32_SPREAD)):
    bfloat16 = r[key].get('mAP@.5')
    gap = None if None in (float32, bfloat16) else abs(bfloat16 - float32)
    rows.append((
        '11. ' + title,
        '%s / %s, difference %s (%s s)%s' % (
            _fmt(bfloat16, 3), _fmt(float32, 3), _fmt(gap, 3),
            _fmt(r[key].get('wall_s'), 0), spread),
        'within 0.02', 'n/a' if gap is None else (
            'met' if gap <= 0.02 else 'not met')))
  return rows


# Item 11's rows: (title, float32 key, bfloat16 key, goal per CPU second).
BFLOAT16_ROWS = (
    ('SSD MobileNetV2 (item 1: 300x300, batch 8)', 'train', 'bfloat16', 1.5),
    ('Faster R-CNN ResNet-50 (item 1c: 320x320, batch 1)', 'train_frcnn',
     'bfloat16_frcnn', 2.0),
)


def _bfloat16_rows(r):
  """Item 11: the training step with --bfloat16 / float32, per CPU s."""
  rows = []
  for title, float32, bfloat16, goal in BFLOAT16_ROWS:
    ratio = _ratio(r[bfloat16], r[float32], 'images_per_cpu_s')
    rows.append((
        '11. Training step --bfloat16 / float32, %s' % title,
        '%s / %s images per CPU s = %s' % (
            _fmt(r[bfloat16].get('images_per_cpu_s')),
            _fmt(r[float32].get('images_per_cpu_s')), _fmt(ratio)),
        '>= %s per CPU second' % goal, _verdict(ratio, goal)))
  return rows


# Item 11c's rows: (title, key).
BFLOAT16_INFERENCE_ROWS = (
    ('SSD MobileNetV2 (300x300)', 'bfloat16_inference'),
    ('Faster R-CNN ResNet-50 (320x320, 100 proposals)',
     'bfloat16_inference_frcnn'),
)


def _bfloat16_inference_rows(r):
  """Item 11c: exported SavedModels --bfloat16 / float32, per CPU s."""
  rows = []
  for title, key in BFLOAT16_INFERENCE_ROWS:
    figures = r[key]
    rows.append((
        '11c. Exported SavedModel (exporter_main_v2) --bfloat16 / float32, '
        'one image at a time, %s' % title,
        figures.get('skipped') or '%s / %s images per CPU s = %s (per '
        'second %s)' % (
            _fmt(figures.get('bfloat16_images_per_cpu_s'), 3),
            _fmt(figures.get('float32_images_per_cpu_s'), 3),
            _fmt(figures.get('cpu_ratio')), _fmt(figures.get('ratio'))),
        'reported', 'reported' if 'cpu_ratio' in figures else 'n/a'))
  return rows


def _tf_version():
  out = subprocess.run([PY, '-c', 'import tensorflow as tf; '
                        'print(tf.__version__)'], capture_output=True,
                       text=True, check=False, env=dict(
                           os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
  return out.stdout.strip()


def _faster_coco_eval_alone(result):
  """The COCO benches' faster-coco-eval alone, as '; faster-coco-eval
  alone: s = x (identical: ...)'."""
  if 'faster_coco_eval_s' not in result:
    return ''
  return '; faster-coco-eval alone: %s s = %s (identical: %s)' % (
      _fmt(result['faster_coco_eval_s'], 1),
      _fmt(result.get('faster_coco_eval_speedup'), 1),
      result.get('faster_coco_eval_identical'))


def _ceiling_row(title, r, suffix, goal):
  """Item 1's kind of row: r['train' + suffix] against r['ceiling' +
  suffix], in images per second (the verdict's) and per CPU second (the
  steadier figure on a shared machine)."""
  train, ceiling = r['train' + suffix], r['ceiling' + suffix]
  ratio = _ratio(train, ceiling)
  per_cpu = _ratio(train, ceiling, 'images_per_cpu_s')
  return (title, '%s / %s images/s = %s%s' % (
      _fmt(train.get('images_per_s')), _fmt(ceiling.get('images_per_s')),
      _fmt(ratio), '' if per_cpu is None else
      ' (per CPU second %s / %s = %s)' % (
          _fmt(train['images_per_cpu_s']),
          _fmt(ceiling['images_per_cpu_s']), _fmt(per_cpu))),
          '>= %s' % goal, _verdict(ratio, goal))


def write_results(r, seconds, command):
  input_ratio = _ratio(r['input'], r['train'])
  coco = r['coco']
  coco_masks = r['coco_masks']
  export = r['export']
  demo = r['demo']
  peer = r['peer']
  peer_frcnn = r['peer_frcnn']
  peer_mask = r['peer_mask_rcnn']
  rows = [
      _ceiling_row('1. Training step / backbone ceiling (SSD MobileNetV2 '
                   '1.0, 300x300, batch 8)', r, '', 0.9),
      _interleaved_row(r),
      _ceiling_row('1c. Faster R-CNN ResNet-50 training step / ResNet-50 '
                   'body ceiling (block3 on the image, block4 on 64 crops; '
                   '320x320, batch 1)', r, '_frcnn', 0.8),
      _ceiling_row('1d. R-FCN ResNet-50 training step / ResNet-50 body '
                   'ceiling (block3 and block4 on the image; 320x320, '
                   'batch 1)', r, '_rfcn', 0.8),
      ('1e. EfficientDet-D0 training step (the original\'s TF2 config, '
       '512x512, batch 4) / EfficientNet-B0 ceiling (stem to stack_6, '
       'same input, same process)', r['train_d0'].get(
           'summary', json.dumps(r['train_d0'])), '>= 0.9 per CPU second',
       _verdict(r['train_d0'].get('cpu_ratio'), 0.9)),
      ('2. Input pipeline (train_input_fn, SSD augmentations, 300x300, '
       'batch 8) / training consumption', '%s / %s images/s = %s' % (
           _fmt(r['input'].get('images_per_s'), 1),
           _fmt(r['train'].get('images_per_s')), _fmt(input_ratio, 1)),
       '>= 3', _verdict(input_ratio, 3.0)),
      ('3. COCO evaluation, 1,500 images x 100 detections, 80 classes: '
       'pycocotools time / ours', '%s s / %s s = %s, identical numbers: %s'
       '%s' % (_fmt(coco.get('pycocotools_s'), 1),
               _fmt(coco.get('ours_s'), 1), _fmt(coco.get('speedup'), 1),
               coco.get('identical'), _faster_coco_eval_alone(coco)),
       '>= 8, identical',
       _verdict(coco.get('speedup') if coco.get('identical') else 0.0,
                8.0)),
      ('3b. COCO mask evaluation (segm), 200 images 480x640 x 100 '
       'detections, 80 classes, RLE encoding included: pycocotools time / '
       'ours', '%s s / %s s = %s, identical numbers: %s (largest '
       'difference %s)' % (
           _fmt(coco_masks.get('pycocotools_s'), 1),
           _fmt(coco_masks.get('ours_s'), 1),
           _fmt(coco_masks.get('speedup'), 1), coco_masks.get('identical'),
           '%.1g' % coco_masks['max_abs_difference']
           if 'max_abs_difference' in coco_masks else 'n/a') +
       _faster_coco_eval_alone(coco_masks),
       '>= 8, identical',
       _verdict(coco_masks.get('speedup') if coco_masks.get('identical')
                else 0.0, 8.0)),
      ('4. Exported SavedModel / Estimator.predict (300x300, one image at a '
       'time)', '%s / %s images/s = %s' % (
           _fmt(export.get('saved_model_images_per_s'), 1),
           _fmt(export.get('estimator_predict_images_per_s'), 1),
           _fmt(export.get('ratio'))),
       '>= 1.0', _verdict(export.get('ratio'), 1.0)),
      ('4b. Same, %s images at a time' % export.get('batch', 8),
       '%s / %s images/s = %s' % (
           _fmt(export.get('batched_saved_model_images_per_s'), 1),
           _fmt(export.get('batched_estimator_predict_images_per_s'), 1),
           _fmt(export.get('batched_ratio'))),
       '>= 1.0', _verdict(export.get('batched_ratio'), 1.0)),
      ('4c. Training step with model_main --xla / without (item 1b\'s '
       'small config)', '%s / %s images/s = %s' % (
           _fmt(r['xla_small'].get('images_per_s')),
           _fmt(r['train_small'].get('images_per_s')),
           _fmt(_ratio(r['xla_small'], r['train_small']))),
       'kept where > 1', 'reported' if 'images_per_s' in r['xla_small']
       else 'n/a'),
      ('4d. How cost grows: training images/s by batch; COCO evaluation CPU '
       's by images (`bench/scaling.png`)', '%s; %s' % (
           ', '.join('b%s: %s' % (k, _fmt(v)) for k, v in r['scaling'].get(
               'train_images_per_s_by_batch', {}).items()),
           ', '.join('%s: %s s' % (k, _fmt(v, 1)) for k, v in r[
               'scaling'].get('eval_cpu_seconds_by_images', {}).items())),
       'plotted', 'reported' if 'plot' in r['scaling'] else 'n/a'),
      ('5. Peak RSS: training (batch 8, 300x300) / evaluation',
       '%s MiB / %s MiB' % (_fmt(r['train'].get('peak_rss_mb'), 0),
                            _fmt(r['eval'].get('peak_rss_mb'), 0)),
       'reported', 'reported' if 'peak_rss_mb' in r['eval'] else 'n/a'),
      ('5b. Quantization-aware training step cost / float (item 1b\'s '
       'small config, CPU s); .tflite uint8 / float: size, CPU latency',
       '%s x; %s / %s KiB, %s / %s ms' % tuple(
           _fmt(r['quantized'].get(key)) for key in (
               'step_cost_ratio', 'uint8_tflite_kib', 'float_tflite_kib',
               'uint8_latency_ms', 'float_latency_ms')),
       'reported', 'reported' if 'step_cost_ratio' in r['quantized']
       else 'n/a'),
      ('6. `make demo` wall time and mAP@.5',
       '%s s, mAP@.5 %s' % (_fmt(demo.get('wall_s'), 0),
                            _fmt(demo.get('mAP@.5'), 3)),
       'mAP@.5 >= 0.6 within 600 s',
       'n/a' if demo.get('mAP@.5') is None else (
           'met' if demo['mAP@.5'] >= 0.6 and demo['wall_s'] <= 600
           else 'not met')),
      ('7. Peer: Model Garden RetinaNet trainer / ours (ResNet50 FPN, '
       '256x256, batch 8)', peer.get('summary', json.dumps(peer)),
       '>= 1.2', _verdict(peer.get('ratio'), 1.2)),
      ('8. Peer: Model Garden Faster R-CNN trainer (maskrcnn task, '
       'include_mask False, ResNet-50 FPN) / ours (ResNet-50; 320x320, '
       'batch 1)', peer_frcnn.get('summary', json.dumps(peer_frcnn)),
       'none (another network: FPN, light head)',
       _reported(peer_frcnn.get('ratio'))),
      ('9. Peer: Model Garden Mask R-CNN trainer (maskrcnn task, mask head '
       'on, ResNet-50 FPN) / ours (item 8 with the original\'s 33x33 mask '
       'head; 320x320, batch 1, same records with masks)',
       peer_mask.get('summary', json.dumps(peer_mask)),
       'none (another network: FPN, light head)',
       _reported(peer_mask.get('ratio'))),
  ] + (_original_rows(r) + _bfloat16_rows(r) + _bfloat16_demo_rows(r) +
       _bfloat16_inference_rows(r) + _original_inference_rows(r))
  lines = [
      '# Benchmarks', '',
      'Written by `%s` on %s; %d cores (%s), TensorFlow %s, Python %s; '
      'whole run %.0f s; load average at the end %s (other work on the '
      'machine slows every figure). Each figure comes from this one run; '
      'ratios are formed from figures measured side by side.' % (
          command, datetime.date.today().isoformat(), os.cpu_count(),
          platform.machine(), _tf_version(), platform.python_version(),
          seconds, ' '.join('%.1f' % l for l in os.getloadavg())), '',
      '| item | measured | goal | status |', '|---|---|---|---|']
  lines += ['| %s | %s | %s | %s |' % row for row in rows]
  lines += ['', 'Whole run: %.0f s, goal < 1800 s (30 minutes): %s. Seconds '
            'per item: %s.' % (seconds, _verdict(1800 - seconds, 0), ', '.join(
                '%s %.0f' % (name, figures['item_seconds'])
                for name, figures in r.items() if 'item_seconds' in figures))]
  lines += ['', '## Raw figures', '', '```',
            json.dumps(r, indent=1, sort_keys=True), '```', '']
  notes = os.path.join(BENCH, 'NOTES.md')
  if os.path.exists(notes):
    with open(notes) as f:
      lines += ['', f.read()]
  with open(os.path.join(BENCH, 'RESULTS.md'), 'w') as f:
    f.write('\n'.join(lines))
  print('\n'.join(lines[:len(rows) + 8]))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--skip_demo', action='store_true')
  parser.add_argument('--skip_bfloat16_inference', action='store_true',
                      help='Item 11c: skip the exported SavedModels '
                           '--bfloat16 / float32.')
  parser.add_argument('--skip_bfloat16_demo', action='store_true',
                      help='Item 11: skip training the demo again with '
                           '--bfloat16 (its mAP@.5 against item 6\'s).')
  parser.add_argument('--skip_peer', action='store_true')
  parser.add_argument('--skip_original', action='store_true',
                      help='Skip items 10 and 12, the original\'s TF2 '
                           'trainer and exports (its environment, '
                           'bench/.orig_venv, is installed on first use).')
  parser.add_argument('--original_rounds', type=int, default=1,
                      help='Item 10: rounds of the original then ours (1: '
                           'ours from items 1 and 1c where the same).')
  parser.add_argument('--orig_python',
                      default=os.environ.get('OD_BENCH_ORIG_PYTHON'),
                      help='Items 10 and 12: the original\'s interpreter '
                           'instead of bench/.orig_venv.')
  args = parser.parse_args(argv)
  os.makedirs(OUT, exist_ok=True)
  start = time.perf_counter()
  results = measure(args)
  write_results(results, time.perf_counter() - start,
                ' '.join(['bench/run_all.py'] + (argv or sys.argv[1:])))
  return 0


if __name__ == '__main__':
  sys.exit(main())
