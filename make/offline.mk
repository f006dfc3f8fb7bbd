# make wheelhouse and make lab WHEELS=wheelhouse (an offline room)
