# Copies the *.tflite of SRC into DST (none is fine: the real models are
# optional, scripts/setup.sh fetches them). cmake -DSRC=... -DDST=... -P this
file(GLOB _models ${SRC}/*.tflite)
if(_models)
  file(COPY ${_models} DESTINATION ${DST})
endif()
