"""Each test starts from no shared scoring service (they are per process, like the pool)."""

import pytest

from precisecoder.integrations import service


@pytest.fixture(autouse=True)
def _fresh_services():
  yield
  service.shutdown()
