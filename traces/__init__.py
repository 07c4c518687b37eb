from common.compiled import install

install()
