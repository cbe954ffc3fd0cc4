"""The scalar summary tags training and evaluation wrote, for tests."""
import glob
import os

from tensorboard.backend.event_processing import event_accumulator


def scalar_tags(directory):
  """The set of scalar tags of every event file directly in `directory`."""
  tags = set()
  for path in glob.glob(os.path.join(directory, 'events.out.tfevents.*')):
    accumulator = event_accumulator.EventAccumulator(path)
    accumulator.Reload()
    tags.update(accumulator.Tags()['scalars'])
  return tags
