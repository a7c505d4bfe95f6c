"""The tiny conv net of the slim Compressor runs, built on whichever fluid is given (PaddlePaddle
1.8.5's in tests/oracle/make_slim_compress.py, spmd's in tests/unit/test_slim_compressor.py), so
the stored runs and the tests build the same program."""


def net(fluid, prefix, x, y):
    """conv(4) relu - conv(6) - batch_norm relu - pool - fc(3); returns its variables."""
    def attr(name):
        return fluid.ParamAttr(name=prefix + name)
    c1 = fluid.layers.conv2d(x, 4, 3, padding=1, act="relu", param_attr=attr("conv1_weights"),
                             bias_attr=attr("conv1_bias"))
    c2 = fluid.layers.conv2d(c1, 6, 3, padding=1, param_attr=attr("conv2_weights"),
                             bias_attr=attr("conv2_bias"))
    bn = fluid.layers.batch_norm(c2, act="relu", param_attr=attr("bn_scale"),
                                 bias_attr=attr("bn_offset"),
                                 moving_mean_name=prefix + "bn_mean",
                                 moving_variance_name=prefix + "bn_variance")
    pool = fluid.layers.pool2d(bn, 2, pool_stride=2)
    logits = fluid.layers.fc(pool, 3, param_attr=attr("fc_weights"), bias_attr=attr("fc_bias"))
    loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
    acc = fluid.layers.accuracy(fluid.layers.softmax(logits), y)
    return {"c1": c1, "c2": c2, "fc": logits, "loss": loss, "acc": acc}
