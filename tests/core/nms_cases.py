"""Hand-made overlapping boxes whose NMS survivors are worked out by hand,
shared by the single-image and the batch NMS tests."""
import numpy as np

# Six unit-height boxes and two classes. IoUs (intersection / union):
#   A-B: 0.8 / 1.2 = 0.667   A-C: 0.4 / 1.6 = 0.25   B-C: 0.6 / 1.4 = 0.43
#   D-E: 0.9 / 1.1 = 0.818   F (2x2, far away) overlaps nothing.
A = [0., 0., 1., 1.]
B = [0., .2, 1., 1.2]
C = [0., .6, 1., 1.6]
D = [0., 5., 1., 6.]
E = [0., 5.1, 1., 6.1]
F = [0., 20., 2., 22.]
BOXES = np.array([A, B, C, D, E, F], np.float32)[:, np.newaxis, :]  # q = 1
SCORES = np.array([[.9, .1],    # A
                   [.8, .0],    # B
                   [.7, .2],    # C
                   [.2, .85],   # D
                   [.3, .6],    # E
                   [.05, .4]],  # F
                  np.float32)
IDS = np.arange(6, dtype=np.float32)  # carried as an additional field
# With score_thresh .15 and iou_thresh .5, greedy NMS keeps
#   class 0 (A .9, B .8, C .7, E .3, D .2): A; B (IoU .667 with A) goes;
#     C (.25 with A) stays; E stays; D (.818 with E) goes.
#   class 1 (D .85, E .6, F .4, C .2): D; E (.818 with D) goes; F; C.
# All survivors by decreasing score: (box id, score, class)
SURVIVORS = [(0, .9, 0), (3, .85, 1), (2, .7, 0), (5, .4, 1), (4, .3, 0),
             (2, .2, 1)]
SCORE_THRESH = .15
IOU_THRESH = .5


def expected(survivors):
  ids = [s[0] for s in survivors]
  return (BOXES[ids, 0], np.array([s[1] for s in survivors], np.float32),
          np.array([s[2] for s in survivors], np.float32),
          np.array(ids, np.float32))



def assert_result(actual, survivors):
  boxes, scores, classes, ids, num_valid = actual
  exp_boxes, exp_scores, exp_classes, exp_ids = expected(survivors)
  assert num_valid == len(survivors)
  np.testing.assert_allclose(boxes, exp_boxes, rtol=1e-6)
  np.testing.assert_allclose(scores, exp_scores, rtol=1e-6)
  np.testing.assert_array_equal(classes, exp_classes)
  np.testing.assert_array_equal(ids, exp_ids)
