"""No SQLite where WAL cannot work: a cache directory on a network file system is refused before any
request, with the fix named (issue 33 item 3). The mounts table is a fake /proc/mounts text."""

import pytest

from inferframe.errors import PlanError
from inferframe.runtime.store.sqlite import ResponseCache, mount_of, refuse_network_fs

MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
fs1:/export /mnt/nfs nfs4 rw,vers=4.2 0 0
//srv/share /mnt/smb cifs rw 0 0
me@host:/data /mnt/ssh fuse.sshfs rw 0 0
fuse-overlayfs /var/lib/ctr fuse.fuse-overlayfs rw 0 0
/dev/vdb /mnt/nfs/local ext4 rw 0 0
fs2:/a /mnt/with\\040space nfs rw 0 0
"""


@pytest.fixture
def mounts(tmp_path):
    f = tmp_path / "mounts"
    f.write_text(MOUNTS)
    return f


@pytest.mark.parametrize("directory, fs", [("/mnt/nfs/cache", "nfs4"), ("/mnt/smb/x/y", "cifs"),
                                           ("/mnt/ssh/c", "fuse.sshfs"), ("/mnt/with space/c", "nfs")])
def test_a_network_mount_is_refused_with_the_fix(mounts, directory, fs):
    with pytest.raises(PlanError) as err:
        ResponseCache(directory, mounts=mounts)
    assert f"({fs} at" in str(err.value) and 'cache_url="postgresql://' in str(err.value)


@pytest.mark.parametrize("directory", ["/home/me/.cache/inferframe", "/mnt/nfs/local/cache", "/var/lib/ctr/x",
                                       "/mnt/nfsx/cache"])
def test_a_local_disk_is_accepted(mounts, directory):
    refuse_network_fs(directory, mounts)  # the deepest mount decides: a local disk mounted inside an NFS one is local


def test_the_refusal_comes_before_the_file_is_made(mounts, tmp_path, monkeypatch):
    target = tmp_path / "cache"
    (tmp_path / "mounts2").write_text(f"/dev/vda / ext4 rw 0 0\nfs:/x {tmp_path} nfs rw 0 0\n")
    with pytest.raises(PlanError):
        ResponseCache(target, mounts=tmp_path / "mounts2")
    assert not target.exists()


def test_an_unreadable_mounts_table_checks_nothing(tmp_path):
    assert mount_of("/x", tmp_path / "missing") is None
    ResponseCache(tmp_path / "c", mounts=tmp_path / "missing").close()
