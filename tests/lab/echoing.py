"""What the lab's fork scripts (forks.py, opener_killed.py) share: one round trip on a
connected stream socket. Imported from the script's own directory, which Python puts first on
sys.path for a script run by its path."""


def echo(s, msg):
    """Sends `msg` on `s` and reads until as many bytes came back or the peer closed: whether
    they are `msg`."""
    s.sendall(msg)
    got = b""
    while len(got) < len(msg):
        chunk = s.recv(len(msg) - len(got))
        if not chunk:
            break
        got += chunk
    return got == msg
