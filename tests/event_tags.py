"""The scalar summaries training and evaluation wrote, for tests."""
import glob
import os

from tensorboard.backend.event_processing import event_accumulator


def _accumulators(directory):
  """A loaded accumulator per event file directly in `directory`."""
  for path in glob.glob(os.path.join(directory, 'events.out.tfevents.*')):
    accumulator = event_accumulator.EventAccumulator(path)
    accumulator.Reload()
    yield accumulator


def scalar_tags(directory):
  """The set of scalar tags of every event file directly in `directory`."""
  tags = set()
  for accumulator in _accumulators(directory):
    tags.update(accumulator.Tags()['scalars'])
  return tags


def last_scalars(directory):
  """{tag: value at its last step} of the event files in `directory`."""
  last = {}
  for accumulator in _accumulators(directory):
    for tag in accumulator.Tags()['scalars']:
      for event in accumulator.Scalars(tag):
        if tag not in last or event.step >= last[tag].step:
          last[tag] = event
  return {tag: event.value for tag, event in last.items()}


def scalar_steps(directory, tag):
  """The sorted steps at which the event files in `directory` hold `tag`."""
  return sorted(event.step for accumulator in _accumulators(directory)
                if tag in accumulator.Tags()['scalars']
                for event in accumulator.Scalars(tag))
