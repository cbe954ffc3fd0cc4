"""Tools that write TFRecords of tf.Examples in the original format."""
