"""Traces as users have them, not as the project's samples are: compressed, separated by tabs or
semicolons, dated, piped in; and the output paths they type. A plausible variant reads as the
original does; anything else is one line and exit code 2."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import tarfile
import threading
import zipfile

import pytest

from chronus_py.cli import main
from chronus_py.errors import InputError
from chronus_py.inputs import ZSTD_MAGIC
from chronus_py.readers import read_trace

PLAIN = (
    "job_id,submit_time,duration,num_gpu,deadline,model_name\n"
    "a,0,600,1,1200,vgg16\n"
    "b,60,300,2,,resnet50\n"
    '"c",120,900,4,3000,"bert, large"\n'
)


def jobs(trace) -> list[tuple]:
    return [(j.id, j.submit, j.duration, j.gpus, j.deadlines, j.model) for j in trace.jobs]


def replay(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["replay", "--nodes", "1", "--policy", "fifo", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *argv: str) -> str:
    """The one line a refused replay prints (exit code 2, nothing on stdout)."""
    code, out, err = replay(capsys, *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    return err.strip()


def test_a_gzip_compressed_trace_reads_as_the_plain_one(write, tmp_path):
    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress(PLAIN.encode()))
    assert jobs(read_trace(path)) == jobs(read_trace(write(PLAIN)))


def zipped(*members: tuple[str, bytes], **options) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, **options) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "name, pack",
    [
        ("t.csv.bz2", bz2.compress),
        ("t.csv.xz", lzma.compress),
        ("t.zip", lambda data: zipped(("t.csv", data))),
        # macOS's Finder adds a folder of resource forks beside the file it compresses.
        (
            "mac.zip",
            lambda data: zipped(("t/", b""), ("t/t.csv", data), ("__MACOSX/t/._t.csv", b"x")),
        ),
        # pbzip2 and parallel xz write several streams, one after another.
        ("two.csv.bz2", lambda data: bz2.compress(data[:50]) + bz2.compress(data[50:])),
        ("two.csv.xz", lambda data: lzma.compress(data[:50]) + lzma.compress(data[50:])),
        ("named.csv", gzip.compress),  # read by its bytes, not its name
    ],
)
def test_other_compressed_traces_read_as_the_plain_one(write, tmp_path, name, pack):
    path = tmp_path / name
    path.write_bytes(pack(PLAIN.encode()))
    assert jobs(read_trace(path)) == jobs(read_trace(write(PLAIN)))


def test_text_that_starts_like_a_bzip2_file_is_still_text(write):
    """Only bzip2's whole signature (with a block's magic after "BZh" and the digit) is taken."""
    path = write("BZh9,submit_time,duration,num_gpu,job_id\n1,0,600,1,a\n")
    assert [j.id for j in read_trace(path).jobs] == ["a"]


@pytest.mark.parametrize(
    "name, pack, why",
    [
        ("t.csv.xz", lambda data: lzma.compress(data)[:40], "not a readable xz file"),
        ("t.csv.bz2", lambda data: bz2.compress(data)[:40], "not a readable bzip2 file"),
        ("t.zip", lambda data: zipped(("t.csv", data))[:60], "not a readable zip file"),
        (
            "two.zip",
            lambda data: zipped(("a.csv", data), ("b.csv", data)),
            "a zip archive with 2 files ('a.csv', 'b.csv'): it must hold one trace",
        ),
        ("empty.zip", lambda data: zipped(), "a zip archive with no file: it must hold one trace"),
        ("t.csv.zst", lambda data: ZSTD_MAGIC + bytes(20), "zstd-compressed: decompress it first"),
    ],
)
def test_an_archive_that_cannot_be_read_is_one_line(tmp_path, capsys, name, pack, why):
    path = tmp_path / name
    path.write_bytes(pack(PLAIN.encode()))
    assert f"{path}: {why}" in refused(capsys, "--trace", str(path))


def test_an_encrypted_zip_member_is_one_line(tmp_path, capsys):
    """zipfile cannot write encrypted members: the flag bit of a stored member is set by hand, as
    an encrypting tool would leave it (the contents are never reached)."""
    data = bytearray(zipped(("t.csv", PLAIN.encode())))
    for header, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.index(header) + flags_at
        data[at] |= 0x1
    path = tmp_path / "locked.zip"
    path.write_bytes(bytes(data))
    assert "is encrypted" in refused(capsys, "--trace", str(path))


def test_a_truncated_gzip_file_is_one_line(tmp_path, capsys):
    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress(PLAIN.encode())[:30])
    assert f"{path}: not a readable gzip file" in refused(capsys, "--trace", str(path))


def test_a_tar_archive_is_refused_not_read_as_columns(tmp_path):
    data = PLAIN.encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        member = tarfile.TarInfo("trace.csv")
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    path = tmp_path / "trace.tar.gz"
    path.write_bytes(buffer.getvalue())
    with pytest.raises(InputError, match="a tar archive: extract the CSV from it first"):
        read_trace(path)


@pytest.mark.parametrize("separator", ["\t", ";", "|"])
def test_other_field_separators_read_as_commas_do(write, separator):
    text = PLAIN.replace('"bert, large"', "bert-large").replace(",", separator)
    trace = read_trace(write(text))
    assert jobs(trace) == jobs(read_trace(write(PLAIN.replace("bert, large", "bert-large"))))
    assert f"fields separated by {separator!r}" in trace.detected


def test_a_semicolon_file_keeps_decimal_commas_as_one_bad_field(write):
    path = write("job_id;submit_time;duration;num_gpu\na;0;1,5;1\n")
    with pytest.raises(InputError, match=r":2: column duration: not a number: '1,5'"):
        read_trace(path)


def test_plain_traces_take_dates_as_the_columns_mapping_does(write):
    dated = write(
        "job_id,submit_time,duration,num_gpu,deadline\n"
        "a,2020-01-01T00:00:00,100,1,2020-01-01 01:00:00\n"
        "b,2020-01-01T00:10:00Z,50,2,\n",
        "dated.csv",
    )
    epoch = write(
        "job_id,submit_time,duration,num_gpu,deadline\n"
        "a,1577836800,100,1,1577840400\nb,1577837400,50,2,\n",
        "epoch.csv",
    )
    assert jobs(read_trace(dated)) == jobs(read_trace(epoch))


def test_a_trace_can_be_piped_in(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(PLAIN))
    writer.start()
    code, out, _ = replay(capsys, "--trace", str(fifo), "--json")
    # A writer the replay read from ends at once; one still waiting after 10 s is blocked in
    # open (the replay never opened the pipe) and is let go. Asked at once, "still alive" was
    # also true of a writer just closing the pipe it wrote, and reading again hung the suite.
    writer.join(10)
    if writer.is_alive():
        fifo.read_text()
    writer.join()
    assert code == 0 and json.loads(out)["jobs"] == 3


def test_a_directory_as_trace_says_so(tmp_path, capsys):
    err = refused(capsys, "--trace", str(tmp_path))
    assert err == f"chronus replay: {tmp_path}: is a directory, not a trace file"


@pytest.mark.parametrize("where", ["file", "file/child"])
def test_an_out_that_cannot_be_a_directory_is_refused_first(write, tmp_path, capsys, where):
    """Refused before the replay (stdout stays empty), not as a traceback after it."""
    trace = write(PLAIN)
    (tmp_path / "file").write_text("")
    out = tmp_path / where
    assert f"chronus replay: {out}: " in refused(capsys, "--trace", str(trace), "--out", str(out))


def test_a_field_mapped_twice_is_refused(write):
    with pytest.raises(InputError, match="--columns: field 'id' is mapped twice"):
        read_trace(write(PLAIN), columns="id=job_id,id=model_name")


def test_a_compression_bomb_is_refused_by_its_uncompressed_size(tmp_path):
    """257 MiB of zeros compress to 257 KiB: the size limit holds for what the file expands to."""
    from placement.loading import MAX_BYTES

    squeeze = gzip.GzipFile(fileobj=(buffer := io.BytesIO()), mode="wb", compresslevel=1)
    chunk = bytes(1 << 20)
    for _ in range(MAX_BYTES // len(chunk) + 1):
        squeeze.write(chunk)
    squeeze.close()
    path = tmp_path / "bomb.csv.gz"
    path.write_bytes(buffer.getvalue())
    with pytest.raises(InputError, match="larger than the limit of .* bytes uncompressed"):
        read_trace(path)


def test_a_date_column_is_read_in_one_order(write):
    """Dates guessed cell by cell read 01/02 month-first and 13/02 day-first in one column."""
    header = "job_id,submit_time,duration,num_gpu\n"
    mixed = write(header + "a,01/02/2020 00:00,10,1\nb,13/02/2020 00:00,10,1\n", "mixed.csv")
    with pytest.raises(InputError, match=r"mixed.csv:3: column submit_time: not a number or date"):
        read_trace(mixed, time_unit="s")
    day_first = write(header + "a,13/02/2020 00:00,10,1\nb,01/03/2020 00:00,10,1\n", "dmy.csv")
    assert [j.submit for j in read_trace(day_first, time_unit="s").jobs] == [0.0, 17 * 86400.0]
