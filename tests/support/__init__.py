"""What the tests share: fakes of the driver, kernels and tables several test modules use, and
helpers. Test modules import from here (`from support.x import ...`), never from each other;
tests/test_house_rules.py holds that."""
