"""The pure planning core: no I/O, time and history are passed in."""
