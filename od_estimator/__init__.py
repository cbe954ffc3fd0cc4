"""od_estimator: the TF1 Object Detection API's Estimator path, maintained."""
