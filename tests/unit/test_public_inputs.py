"""dp_spark.public_inputs: the path comparison behind the refusal of a
"public" keys file or domain that is the private input (issue 42 G29).
No Spark: the private input's files are given as ``inputFiles()`` would
list them (URIs), through a stand-in frame."""

from __future__ import annotations

import os

import pytest

from dp_spark.errors import ParameterError
from dp_spark.public_inputs import locations_of_path, overlapping, refuse_private_as_public, refuse_private_paths


class Files:
    """A frame whose ``inputFiles()`` lists ``files`` (what Spark returns: URIs)."""

    columns = ["g"]

    def __init__(self, *files):
        self.files = list(files)

    def inputFiles(self):  # noqa: N802 - Spark's name
        return self.files


@pytest.fixture
def tree(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "part-0.csv").write_text("p,i,g\n1,a,x\n")
    (data / "part-1.csv").write_text("p,i,g\n2,b,y\n")
    keys = tmp_path / "keys.csv"
    keys.write_text("g\nx\n")
    return tmp_path


def _private(tree):
    return Files(*[(tree / "data" / n).as_uri() for n in ("part-0.csv", "part-1.csv")])


@pytest.mark.parametrize("public", [
    "data/part-0.csv",           # an input file itself
    "data",                      # the folder holding the input
    "data/",                     # ... with a trailing slash
    ".",                         # a folder holding it further up
    "data/./part-1.csv",         # spelled with a dot
    "FILE",                      # a file: URI of an input file
    "file:data",                 # file:/abs/data
    "data/part-*.csv",           # a glob matching input files
    "data/part-{0,9}.csv",       # Hadoop's braces
])
def test_the_input_is_refused(tree, public):
    if public == "FILE":
        public = (tree / "data" / "part-0.csv").as_uri()
    elif public.startswith("file:"):
        public = "file:" + str(tree / public.removeprefix("file:"))
    else:
        public = str(tree / public)
    for name in ("groups", "domain"):
        with pytest.raises(ParameterError, match=f"^{name}: .* is the private input.*omit"):
            refuse_private_as_public(_private(tree), **{name: public})


def test_a_symlink_is_resolved(tree):
    link = tree / "link.csv"
    os.symlink(tree / "data" / "part-0.csv", link)
    folder = tree / "linkdir"
    os.symlink(tree / "data", folder)
    for public in (link, folder, folder / "part-1.csv"):
        with pytest.raises(ParameterError, match="private input"):
            refuse_private_as_public(_private(tree), groups=str(public))
    # the input read through a symlinked folder, the keys named by the real path
    through_link = Files((folder / "part-0.csv").as_uri())
    with pytest.raises(ParameterError, match="private input"):
        refuse_private_as_public(through_link, groups=str(tree / "data" / "part-0.csv"))


def test_a_file_inside_an_input_folder_is_refused(tree):
    """A single-file input read as its folder: the file inside it lies inside the input."""
    folder_input = Files((tree / "data").as_uri())  # e.g. a table location listed as a folder
    with pytest.raises(ParameterError, match="private input"):
        refuse_private_as_public(folder_input, groups=str(tree / "data" / "part-0.csv"))


def test_other_public_files_pass(tree):
    private = _private(tree)
    for public in (tree / "keys.csv", tree / "data-keys.csv", tree / "dat", tree / "data" / "part-2.csv"):
        refuse_private_as_public(private, groups=str(public), domain=str(public))
    refuse_private_as_public(private, groups=("x", "y"), domain=["a", "b"])  # lists: not paths
    refuse_private_as_public(Files(), groups=str(tree / "data"))  # an input built in memory: no files


def test_a_public_frame_is_compared_by_its_files(tree):
    private = _private(tree)
    with pytest.raises(ParameterError, match="^groups: .*a DataFrame read from the input's files"):
        refuse_private_as_public(private, groups=Files((tree / "data" / "part-1.csv").as_uri()))
    refuse_private_as_public(private, groups=Files((tree / "keys.csv").as_uri()))
    refuse_private_as_public(private, domain=Files())  # built in memory


def test_other_file_systems_compare_lexically():
    private = Files("hdfs://nn:8020/warehouse/events/part-0.parquet", "s3a://bucket/x/part-0.parquet")
    for public in ("hdfs://nn:8020/warehouse/events", "hdfs:///warehouse/events/", "HDFS://NN:8020/warehouse",
                   "s3a://bucket/x/part-0.parquet", "s3a://bucket/*/part-0.parquet", "/warehouse/events"):
        with pytest.raises(ParameterError, match="private input"):
            refuse_private_as_public(private, groups=public)
    for public in ("hdfs://other:8020/warehouse/events", "s3a://bucket/y", "s3a://other/x",
                   "gs://bucket/x", "hdfs://nn:8020/warehouse/events-keys.csv"):
        refuse_private_as_public(private, groups=public)


def test_percent_encoded_input_files(tmp_path):
    folder = tmp_path / "my data"
    folder.mkdir()
    (folder / "a b.csv").write_text("g\nx\n")
    private = Files((folder / "a b.csv").as_uri())  # file:///.../my%20data/a%20b.csv
    with pytest.raises(ParameterError, match="private input"):
        refuse_private_as_public(private, domain=str(folder))
    assert overlapping(locations_of_path(str(folder / "a b.csv")), locations_of_path((folder / "a b.csv").as_uri()))


def test_the_message_is_one_line_and_names_the_fix(tree):
    with pytest.raises(ParameterError) as groups:
        refuse_private_as_public(_private(tree), groups=str(tree / "data"))
    with pytest.raises(ParameterError) as domain:
        refuse_private_as_public(_private(tree), domain=str(tree / "data"))
    for exc, fix in ((groups, "omit groups= (--groups) to choose the keys privately"),
                     (domain, "omit domain= (--domain) to run unknown-domain")):
        text = str(exc.value)
        assert "\n" not in text and fix in text and "without differential privacy" in text


def test_a_hard_link_to_an_input_file_is_refused(tree):
    """The review's leak: a hard link to the input under another name passed the path comparison and
    released every key of the private data, a single person's included."""
    os.link(tree / "data" / "part-0.csv", tree / "hard.csv")
    (tree / "pub").mkdir()
    os.link(tree / "data" / "part-1.csv", tree / "pub" / "inside.csv")
    for public in ("hard.csv", "pub"):
        for name in ("groups", "domain"):
            with pytest.raises(ParameterError, match=f"^{name}: .* is the private input .or a hard link"):
                refuse_private_as_public(_private(tree), **{name: str(tree / public)})
            with pytest.raises(ParameterError, match="is the private input"):
                refuse_private_paths(str(tree / "data"), **{name: str(tree / public)})  # before Spark


def test_a_copy_of_an_input_file_is_not_read_to_be_told_apart(tree):
    """Whether a run is refused may not depend on the private bytes: a byte-for-byte copy of an input file is
    a file of its own (refusing it would tell a copy of the input from a copy of its neighbour)."""
    (tree / "copy.csv").write_bytes((tree / "data" / "part-1.csv").read_bytes())
    refuse_private_as_public(_private(tree), groups=str(tree / "copy.csv"))
    refuse_private_paths(str(tree / "data"), groups=str(tree / "copy.csv"))


@pytest.mark.parametrize("private, public", [
    ("s3://bucket/events/", "s3a://bucket/events/part-0.parquet"),
    ("s3n://bucket/events", "s3://bucket/events"),
    ("hdfs://nn:8020/data/events", "hdfs://nn/data/events/part-0.parquet"),
])
def test_one_file_system_under_two_uri_spellings(private, public):
    with pytest.raises(ParameterError, match="is the private input"):
        refuse_private_paths(private, groups=public)
